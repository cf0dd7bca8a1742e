-- An item's current version lives in its row only: ``store_item_versions`` keeps the versions
-- it replaced (archived when the row changes or goes) and its deletions, so that a first put
-- writes one row instead of two. Its history reads both (``{item_versions}``).
DROP TRIGGER store_items_version_insert;
DROP TRIGGER store_items_version_update;
DELETE FROM store_item_versions
WHERE EXISTS (
    SELECT 1 FROM store_items i WHERE i.namespace = store_item_versions.namespace
        AND i.prefix = store_item_versions.prefix AND i.key = store_item_versions.key
        AND i.version = store_item_versions.version
);
CREATE TRIGGER store_items_version_update AFTER UPDATE OF version ON store_items BEGIN
    INSERT INTO store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (old.namespace, old.prefix, old.key, old.version, old.value, old.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;
CREATE TRIGGER store_items_version_delete AFTER DELETE ON store_items BEGIN
    INSERT INTO store_item_versions (namespace, prefix, key, version, value, created_at)
    VALUES (old.namespace, old.prefix, old.key, old.version, old.value, old.updated_at)
    ON CONFLICT (namespace, prefix, key, version) DO UPDATE SET value = excluded.value, created_at = excluded.created_at;
END;
