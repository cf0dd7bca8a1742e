-- Items belong to the namespace of the manager that wrote them (``namespace``; every item
-- stored before is in the default one, ''). The three item tables are rebuilt with it leading
-- their keys, so that a namespace's prefix search and listing stay ranges of an index; an
-- item keeps its ``seq``, so the keyword index (``store_items_fts``) stays valid as it is.
CREATE TABLE store_items_new (
    seq          INTEGER PRIMARY KEY,
    namespace    TEXT    NOT NULL,
    prefix       TEXT    NOT NULL,
    key          TEXT    NOT NULL,
    value        TEXT    NOT NULL,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    updated_at   INTEGER NOT NULL,
    expires_at   INTEGER,
    ttl_minutes  REAL,
    search_terms TEXT    NOT NULL DEFAULT '',
    UNIQUE (namespace, prefix, key)
);
INSERT INTO store_items_new (seq, namespace, prefix, key, value, version, created_at, updated_at, expires_at,
    ttl_minutes, search_terms)
SELECT seq, '', prefix, key, value, version, created_at, updated_at, expires_at, ttl_minutes, search_terms
FROM store_items;
DROP TABLE store_items;
ALTER TABLE store_items_new RENAME TO store_items;
CREATE INDEX store_items_expiry ON store_items (namespace, expires_at) WHERE expires_at IS NOT NULL;

CREATE TABLE store_item_versions_new (
    namespace  TEXT    NOT NULL,
    prefix     TEXT    NOT NULL,
    key        TEXT    NOT NULL,
    version    INTEGER NOT NULL,
    value      TEXT,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (namespace, prefix, key, version)
) WITHOUT ROWID;
INSERT INTO store_item_versions_new (namespace, prefix, key, version, value, created_at)
SELECT '', prefix, key, version, value, created_at FROM store_item_versions;
DROP TABLE store_item_versions;
ALTER TABLE store_item_versions_new RENAME TO store_item_versions;

CREATE TABLE store_item_vectors_new (
    namespace TEXT NOT NULL,
    prefix    TEXT NOT NULL,
    key       TEXT NOT NULL,
    field     TEXT NOT NULL,
    vector    BLOB NOT NULL,
    PRIMARY KEY (namespace, prefix, key, field)
) WITHOUT ROWID;
INSERT INTO store_item_vectors_new (namespace, prefix, key, field, vector)
SELECT '', prefix, key, field, vector FROM store_item_vectors;
DROP TABLE store_item_vectors;
ALTER TABLE store_item_vectors_new RENAME TO store_item_vectors;

CREATE TRIGGER store_items_version_insert AFTER INSERT ON store_items BEGIN
    INSERT INTO store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (new.namespace, new.prefix, new.key, new.version, new.value, new.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;
CREATE TRIGGER store_items_version_update AFTER UPDATE OF version ON store_items BEGIN
    INSERT INTO store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (new.namespace, new.prefix, new.key, new.version, new.value, new.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;
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
