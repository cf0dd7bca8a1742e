CREATE TABLE blobs (
    digest TEXT    PRIMARY KEY,
    size   INTEGER NOT NULL,
    data   BLOB    NOT NULL
);
CREATE TABLE message_blobs (
    message_seq INTEGER NOT NULL,
    digest      TEXT    NOT NULL,
    PRIMARY KEY (message_seq, digest)
);
CREATE INDEX message_blobs_digest ON message_blobs (digest);
CREATE TRIGGER message_blobs_release AFTER DELETE ON session_messages BEGIN
    DELETE FROM message_blobs WHERE message_seq = old.seq;
END;
CREATE TRIGGER blobs_collect AFTER DELETE ON message_blobs
WHEN NOT EXISTS (SELECT 1 FROM message_blobs WHERE digest = old.digest) BEGIN
    DELETE FROM blobs WHERE digest = old.digest;
END;
