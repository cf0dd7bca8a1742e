-- Items belong to the namespace of the manager that wrote them, as SQLite's migration 0014:
-- ``namespace`` ('' for every item stored before) leads the keys of the three item tables.
ALTER TABLE {schema}.store_items ADD COLUMN namespace TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {schema}.store_items ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE {schema}.store_items DROP CONSTRAINT store_items_prefix_key_key,
    ADD CONSTRAINT store_items_namespace_prefix_key_key UNIQUE (namespace, prefix, key);
DROP INDEX {schema}.store_items_expiry;
CREATE INDEX store_items_expiry ON {schema}.store_items (namespace, expires_at) WHERE expires_at IS NOT NULL;

ALTER TABLE {schema}.store_item_versions ADD COLUMN namespace TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {schema}.store_item_versions ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE {schema}.store_item_versions DROP CONSTRAINT store_item_versions_pkey,
    ADD PRIMARY KEY (namespace, prefix, key, version);

ALTER TABLE {schema}.store_item_vectors ADD COLUMN namespace TEXT COLLATE "C" NOT NULL DEFAULT '';
ALTER TABLE {schema}.store_item_vectors ALTER COLUMN namespace DROP DEFAULT;
ALTER TABLE {schema}.store_item_vectors DROP CONSTRAINT store_item_vectors_pkey,
    ADD PRIMARY KEY (namespace, prefix, key, field);

-- A new row's version is numbered from its statement's snapshot, which may predate versions
-- that a concurrent writer of the key committed while the insert waited for it (a deletion
-- among them): the row is then numbered again after the newest, read now, when no other writer
-- of the key can come between (they wait for this row), and that update records the version.
CREATE OR REPLACE FUNCTION {schema}.store_item_version() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    newest INTEGER;
BEGIN
    IF TG_OP = 'INSERT' THEN
        SELECT max(version) INTO newest FROM {schema}.store_item_versions
        WHERE namespace = NEW.namespace AND prefix = NEW.prefix AND key = NEW.key;
        IF newest >= NEW.version THEN
            UPDATE {schema}.store_items SET version = newest + 1 WHERE seq = NEW.seq;
            RETURN NULL;
        END IF;
    END IF;
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (NEW.namespace, NEW.prefix, NEW.key, NEW.version, NEW.value, NEW.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;

UPDATE {schema}.session_memory_schema SET version = 11;
