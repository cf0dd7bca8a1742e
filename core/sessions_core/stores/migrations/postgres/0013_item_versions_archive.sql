-- An item's current version lives in its row only, as SQLite's migration 0016: ``store_item_versions``
-- keeps the versions it replaced (archived when the row's version changes or the row goes) and
-- its deletions, so that a first put writes one row instead of two. Its history reads both
-- (``{item_versions}``).

-- An inserted row whose version is not above the newest kept one (committed, by a concurrent
-- writer of the key, after the insert's snapshot: a deletion among them) is numbered again
-- after it, read now, when no other writer of the key can come between (they wait for this row).
CREATE OR REPLACE FUNCTION {schema}.store_items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    UPDATE {schema}.store_items i SET version = m.version + 1
    FROM added a CROSS JOIN LATERAL (
        SELECT max(v.version) AS version FROM {schema}.store_item_versions v
        WHERE v.namespace = a.namespace AND v.prefix = a.prefix AND v.key = a.key
    ) m
    WHERE i.seq = a.seq AND m.version >= a.version;
    RETURN NULL;
END;
$$;

-- A row whose version an update changed is archived as it was; one it left (a TTL refresh, the
-- keyword index filled in) is not, nor one the insert trigger above numbered again (it had no
-- version of its own yet).
DROP TRIGGER store_items_version_update ON {schema}.store_items;
DROP FUNCTION {schema}.store_items_updated();
CREATE FUNCTION {schema}.store_items_replaced() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    IF pg_trigger_depth() > 1 THEN
        RETURN NULL;
    END IF;
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    SELECT o.namespace, o.prefix, o.key, o.version, o.value, o.updated_at
    FROM replaced o JOIN changed n ON n.seq = o.seq
    WHERE n.version <> o.version
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;
CREATE TRIGGER store_items_version_update AFTER UPDATE ON {schema}.store_items
REFERENCING OLD TABLE AS replaced NEW TABLE AS changed FOR EACH STATEMENT
EXECUTE FUNCTION {schema}.store_items_replaced();

CREATE FUNCTION {schema}.store_items_removed() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    SELECT o.namespace, o.prefix, o.key, o.version, o.value, o.updated_at FROM removed o
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;
CREATE TRIGGER store_items_version_delete AFTER DELETE ON {schema}.store_items
REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.store_items_removed();

DELETE FROM {schema}.store_item_versions v USING {schema}.store_items i
WHERE i.namespace = v.namespace AND i.prefix = v.prefix AND i.key = v.key AND i.version = v.version;

UPDATE {schema}.session_memory_schema SET version = 13;
