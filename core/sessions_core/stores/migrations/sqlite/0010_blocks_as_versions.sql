-- A plain context block is its versions (key ''): the current block is the newest one, read by a
-- seek, and a write is one insert. What context_blocks held becomes the newest version of its
-- block unless it is that already (an import may have brought later numbers, or the same number
-- with another text: then it comes after them, so what the block shows does not change).
INSERT INTO context_block_versions (session_id, label, key, version, created_at, source, tool_call_id, content)
SELECT b.session_id, b.label, '', coalesce(newest.version, 0) + 1, b.updated_at, b.source, b.tool_call_id, b.content
FROM context_blocks b
LEFT JOIN (
    SELECT session_id, label, max(version) AS version FROM context_block_versions WHERE key = ''
    GROUP BY session_id, label
) newest ON newest.session_id = b.session_id AND newest.label = b.label
WHERE NOT EXISTS (
    SELECT 1 FROM context_block_versions v
    WHERE v.session_id = b.session_id AND v.label = b.label AND v.key = '' AND v.version = b.version
      AND v.version = newest.version AND v.content = b.content
);
DROP TRIGGER IF EXISTS context_blocks_version_insert;
DROP TRIGGER IF EXISTS context_blocks_version_update;
DROP TABLE context_blocks;
