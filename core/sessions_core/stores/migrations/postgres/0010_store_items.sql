-- LangGraph-style items (``ItemStore``), as SQLite's migration 0013. Keys sort by their bytes
-- (COLLATE "C"), so that a namespace prefix is a range of ``prefix``.
CREATE TABLE {schema}.store_items (
    seq          BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    prefix       TEXT COLLATE "C" NOT NULL,
    key          TEXT COLLATE "C" NOT NULL,
    value        JSONB            NOT NULL,
    version      INTEGER          NOT NULL,
    created_at   BIGINT           NOT NULL,
    updated_at   BIGINT           NOT NULL,
    expires_at   BIGINT,
    ttl_minutes  DOUBLE PRECISION,
    search_terms TSVECTOR         NOT NULL DEFAULT '',
    UNIQUE (prefix, key)
);
CREATE INDEX store_items_expiry ON {schema}.store_items (expires_at) WHERE expires_at IS NOT NULL;
CREATE INDEX store_items_search ON {schema}.store_items USING GIN (search_terms);

CREATE TABLE {schema}.store_item_versions (
    prefix     TEXT COLLATE "C" NOT NULL,
    key        TEXT COLLATE "C" NOT NULL,
    version    INTEGER          NOT NULL,
    value      JSONB,
    created_at BIGINT           NOT NULL,
    PRIMARY KEY (prefix, key, version)
);
CREATE FUNCTION {schema}.store_item_version() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.store_item_versions (prefix, key, version, value, created_at)
    VALUES (NEW.prefix, NEW.key, NEW.version, NEW.value, NEW.updated_at)
    ON CONFLICT (prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;
CREATE TRIGGER store_items_version_insert AFTER INSERT ON {schema}.store_items
FOR EACH ROW EXECUTE FUNCTION {schema}.store_item_version();
CREATE TRIGGER store_items_version_update AFTER UPDATE OF version ON {schema}.store_items
FOR EACH ROW EXECUTE FUNCTION {schema}.store_item_version();

CREATE TABLE {schema}.store_item_vectors (
    prefix TEXT COLLATE "C" NOT NULL,
    key    TEXT COLLATE "C" NOT NULL,
    field  TEXT COLLATE "C" NOT NULL,
    vector BYTEA NOT NULL,
    PRIMARY KEY (prefix, key, field)
);

UPDATE {schema}.session_memory_schema SET version = 10;
