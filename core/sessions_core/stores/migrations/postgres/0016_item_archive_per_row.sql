-- A replaced item version is archived by a row trigger whose condition PostgreSQL tests as the
-- row changes, not by a statement trigger: an upsert fires its statement's UPDATE triggers even
-- when it inserted every row, so each put of a new key (the common put) paid for a trigger call
-- (about 35 µs) that archived nothing. The row trigger runs only for a row whose version changed
-- in a statement of the client's (not the insert trigger's renumbering); what it archives is
-- unchanged.
DROP TRIGGER store_items_version_update ON {schema}.store_items;
DROP FUNCTION {schema}.store_items_replaced();
CREATE FUNCTION {schema}.store_item_replaced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (OLD.namespace, OLD.prefix, OLD.key, OLD.version, OLD.value, OLD.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;
CREATE TRIGGER store_items_version_update AFTER UPDATE ON {schema}.store_items FOR EACH ROW
WHEN (OLD.version IS DISTINCT FROM NEW.version AND pg_trigger_depth() = 0)
EXECUTE FUNCTION {schema}.store_item_replaced();

UPDATE {schema}.session_memory_schema SET version = 16;
