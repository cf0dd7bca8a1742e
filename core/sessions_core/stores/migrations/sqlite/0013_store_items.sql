-- LangGraph-style items (``ItemStore``): a value per namespace and key, every write kept as a
-- version. ``prefix`` is the namespace's labels joined by '.' (a label holds no '.'); times are
-- microseconds since the epoch. ``search_terms`` are the item's terms for keyword search
-- ('' when it is not indexed); ``store_item_vectors`` keeps the embeddings of indexed fields.
CREATE TABLE store_items (
    seq          INTEGER PRIMARY KEY,
    prefix       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    ttl_minutes  REAL,
    search_terms TEXT    NOT NULL DEFAULT '',
    UNIQUE (prefix, key)
);
CREATE INDEX store_items_expiry ON store_items (expires_at) WHERE expires_at IS NOT NULL;

-- Every value an item held, by version; a NULL value is a deletion. Writers of one key racing
-- for a version number (a deletion against a write) leave the last one's value under it.
CREATE TABLE store_item_versions (
    prefix     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    value      TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (prefix, key, version)
) WITHOUT ROWID;
CREATE TRIGGER store_items_version_insert AFTER INSERT ON store_items BEGIN
    INSERT INTO store_item_versions (prefix, key, version, value, created_at)
    VALUES (new.prefix, new.key, new.version, new.value, new.updated_at)
    ON CONFLICT (prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;
CREATE TRIGGER store_items_version_update AFTER UPDATE OF version ON store_items BEGIN
    INSERT INTO store_item_versions (prefix, key, version, value, created_at)
    VALUES (new.prefix, new.key, new.version, new.value, new.updated_at)
    ON CONFLICT (prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;

CREATE TABLE store_item_vectors (
    prefix TEXT NOT NULL,
    key    TEXT NOT NULL,
    field  TEXT NOT NULL,
    vector BLOB NOT NULL,
    PRIMARY KEY (prefix, key, field)
) WITHOUT ROWID;

CREATE VIRTUAL TABLE store_items_fts USING fts5(
    search_terms, content='store_items', content_rowid='seq', tokenize='ascii'
);
CREATE TRIGGER store_items_fts_insert AFTER INSERT ON store_items
WHEN new.search_terms <> '' BEGIN
    INSERT INTO store_items_fts (rowid, search_terms) VALUES (new.seq, new.search_terms);
END;
CREATE TRIGGER store_items_fts_delete AFTER DELETE ON store_items
WHEN old.search_terms <> '' BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms) VALUES ('delete', old.seq, old.search_terms);
END;
CREATE TRIGGER store_items_fts_update AFTER UPDATE OF search_terms ON store_items BEGIN
    INSERT INTO store_items_fts (store_items_fts, rowid, search_terms)
    SELECT 'delete', old.seq, old.search_terms WHERE old.search_terms <> '';
    INSERT INTO store_items_fts (rowid, search_terms)
    SELECT new.seq, new.search_terms WHERE new.search_terms <> '';
END;
