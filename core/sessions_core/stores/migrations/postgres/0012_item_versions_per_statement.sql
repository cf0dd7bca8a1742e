-- An item's versions are written once per statement, from its transition tables, not by a
-- function call per row: the same versions as migration 0011's row trigger. Every insert and
-- every change of ``version`` records the row as that version; an inserted row whose version
-- is not above the newest kept one (committed, by a concurrent writer of the key, after the
-- insert's snapshot: a deletion among them) is numbered again after it, read now, when no
-- other writer of the key can come between (they wait for this row), and that update records
-- the version.
DROP TRIGGER store_items_version_insert ON {schema}.store_items;
DROP TRIGGER store_items_version_update ON {schema}.store_items;
DROP FUNCTION {schema}.store_item_version();

-- Each inserted row's newest kept version is read by the primary key (a lateral subquery, not a
-- join: a statement's plan is made once, for whatever number of rows its first call had).
CREATE FUNCTION {schema}.store_items_inserted() RETURNS trigger LANGUAGE plpgsql AS $$
DECLARE
    stale BIGINT[];
    newest INTEGER[];
BEGIN
    SELECT array_agg(a.seq), array_agg(m.version) INTO stale, newest
    FROM added a CROSS JOIN LATERAL (
        SELECT max(v.version) AS version FROM {schema}.store_item_versions v
        WHERE v.namespace = a.namespace AND v.prefix = a.prefix AND v.key = a.key
    ) m
    WHERE m.version >= a.version;
    IF stale IS NOT NULL THEN
        UPDATE {schema}.store_items i SET version = s.version + 1
        FROM unnest(stale, newest) AS s(seq, version) WHERE i.seq = s.seq;
    END IF;
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    SELECT a.namespace, a.prefix, a.key, a.version, a.value, a.updated_at FROM added a
    WHERE stale IS NULL OR a.seq <> ALL (stale)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = EXCLUDED.value, created_at = EXCLUDED.created_at;
    RETURN NULL;
END;
$$;

-- A row whose version an update changed has no version of that number yet (the newest kept
-- version is the item's); one it left (a TTL refresh, the keyword index filled in) has.
CREATE FUNCTION {schema}.store_items_updated() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO {schema}.store_item_versions (namespace, prefix, key, version, value, created_at)
    SELECT n.namespace, n.prefix, n.key, n.version, n.value, n.updated_at FROM changed n
    ON CONFLICT (namespace, prefix, key, version) DO NOTHING;
    RETURN NULL;
END;
$$;

CREATE TRIGGER store_items_version_insert AFTER INSERT ON {schema}.store_items
REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION {schema}.store_items_inserted();
CREATE TRIGGER store_items_version_update AFTER UPDATE ON {schema}.store_items
REFERENCING NEW TABLE AS changed FOR EACH STATEMENT EXECUTE FUNCTION {schema}.store_items_updated();

UPDATE {schema}.session_memory_schema SET version = 12;
