CREATE TABLE IF NOT EXISTS {schema}.session_memory_schema (
    version INTEGER NOT NULL
);
INSERT INTO {schema}.session_memory_schema (version)
SELECT 0 WHERE NOT EXISTS (SELECT 1 FROM {schema}.session_memory_schema);

CREATE TABLE {schema}.session_messages (
    seq          BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id   TEXT    NOT NULL,
    id           TEXT    NOT NULL,
    parent_id    TEXT,
    role         TEXT    NOT NULL,
    created_at   BIGINT  NOT NULL,
    tokens       INTEGER NOT NULL,
    bytes        INTEGER NOT NULL,
    depth        INTEGER NOT NULL,
    path_tokens  BIGINT  NOT NULL,
    path_bytes   BIGINT  NOT NULL,
    text_content TEXT    NOT NULL DEFAULT '',
    content      TEXT    NOT NULL,
    content_tsv  TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', text_content)) STORED,
    UNIQUE (session_id, id)
);
CREATE INDEX session_messages_parent ON {schema}.session_messages (session_id, parent_id);
CREATE INDEX session_messages_created ON {schema}.session_messages (session_id, created_at, seq);
CREATE INDEX session_messages_fts ON {schema}.session_messages USING GIN (content_tsv);

CREATE TABLE {schema}.session_compactions (
    seq             BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id      TEXT   NOT NULL,
    id              TEXT   NOT NULL UNIQUE,
    from_message_id TEXT   NOT NULL,
    to_message_id   TEXT   NOT NULL,
    created_at      BIGINT NOT NULL,
    summary         TEXT   NOT NULL
);
CREATE INDEX session_compactions_session ON {schema}.session_compactions (session_id, created_at, seq);

CREATE TABLE {schema}.context_blocks (
    session_id TEXT   NOT NULL,
    label      TEXT   NOT NULL,
    updated_at BIGINT NOT NULL,
    content    TEXT   NOT NULL,
    PRIMARY KEY (session_id, label)
);

CREATE TABLE {schema}.cached_prompts (
    session_id TEXT   PRIMARY KEY,
    updated_at BIGINT NOT NULL,
    prompt     TEXT   NOT NULL
);

CREATE TABLE {schema}.search_entries (
    seq         BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    session_id  TEXT   NOT NULL,
    label       TEXT   NOT NULL,
    key         TEXT   NOT NULL,
    created_at  BIGINT NOT NULL,
    updated_at  BIGINT NOT NULL,
    content     TEXT   NOT NULL,
    content_tsv TSVECTOR GENERATED ALWAYS AS (to_tsvector('english', content)) STORED,
    UNIQUE (session_id, label, key)
);
CREATE INDEX search_entries_fts ON {schema}.search_entries USING GIN (content_tsv);

CREATE TABLE {schema}.sessions (
    seq               BIGINT GENERATED ALWAYS AS IDENTITY,
    namespace         TEXT   NOT NULL,
    id                TEXT   NOT NULL,
    storage_id        TEXT   NOT NULL UNIQUE,
    name              TEXT   NOT NULL,
    parent_session_id TEXT,
    model             TEXT,
    source            TEXT,
    input_tokens      BIGINT NOT NULL DEFAULT 0,
    output_tokens     BIGINT NOT NULL DEFAULT 0,
    estimated_cost    DOUBLE PRECISION NOT NULL DEFAULT 0,
    end_reason        TEXT,
    created_at        BIGINT NOT NULL,
    updated_at        BIGINT NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX sessions_updated ON {schema}.sessions (namespace, updated_at, seq);

UPDATE {schema}.session_memory_schema SET version = 1;
