CREATE TABLE sessions (
    namespace         TEXT    NOT NULL,
    id                TEXT    NOT NULL,
    storage_id        TEXT    NOT NULL UNIQUE,
    name              TEXT    NOT NULL,
    parent_session_id TEXT,
    model             TEXT,
    source            TEXT,
    input_tokens      INTEGER NOT NULL DEFAULT 0,
    output_tokens     INTEGER NOT NULL DEFAULT 0,
    estimated_cost    REAL    NOT NULL DEFAULT 0,
    end_reason        TEXT,
    created_at        INTEGER NOT NULL,
    updated_at        INTEGER NOT NULL,
    PRIMARY KEY (namespace, id)
);
CREATE INDEX sessions_updated ON sessions (namespace, updated_at);
