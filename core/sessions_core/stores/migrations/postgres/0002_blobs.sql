CREATE TABLE {schema}.blobs (
    digest TEXT    PRIMARY KEY,
    size   INTEGER NOT NULL,
    data   BYTEA   NOT NULL
);
CREATE TABLE {schema}.message_blobs (
    message_seq BIGINT NOT NULL REFERENCES {schema}.session_messages (seq) ON DELETE CASCADE,
    digest      TEXT   NOT NULL,
    PRIMARY KEY (message_seq, digest)
);
CREATE INDEX message_blobs_digest ON {schema}.message_blobs (digest);
CREATE FUNCTION {schema}.collect_blob() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    DELETE FROM {schema}.blobs b
    WHERE b.digest = OLD.digest
      AND NOT EXISTS (SELECT 1 FROM {schema}.message_blobs l WHERE l.digest = OLD.digest);
    RETURN NULL;
END;
$$;
CREATE TRIGGER blobs_collect AFTER DELETE ON {schema}.message_blobs
FOR EACH ROW EXECUTE FUNCTION {schema}.collect_blob();

UPDATE {schema}.session_memory_schema SET version = 2;
