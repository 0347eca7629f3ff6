-- A kerntune cache of schema version 5, as kerntune 0.1.0 wrote it before decisions recorded
-- their device's architecture and vendor and their key's kinds: decisions, units, deferred keys,
-- progress. tests/test-store.c builds a file from this text with sqlite3_exec and checks that
-- opening it migrates it to version 6 keeping everything, the new columns empty.
CREATE TABLE decisions (
  id INTEGER PRIMARY KEY,
  op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,
  key TEXT NOT NULL,
  winner_candidate TEXT NOT NULL, winner_config TEXT,
  time_ns REAL NOT NULL, confidence REAL NOT NULL DEFAULT -1, created INTEGER NOT NULL,
  requested_confidence REAL NOT NULL DEFAULT -1,
  UNIQUE (op, set_hash, device, version, key));
CREATE TABLE units (
  decision INTEGER NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  candidate TEXT NOT NULL, config TEXT, unit_hash TEXT NOT NULL,
  outcome INTEGER NOT NULL, time_ns REAL NOT NULL,
  ci_low_ns REAL NOT NULL, ci_high_ns REAL NOT NULL,
  runs INTEGER NOT NULL, warmups INTEGER NOT NULL, message TEXT,
  finalist INTEGER NOT NULL DEFAULT 0,
  PRIMARY KEY (decision, idx)) WITHOUT ROWID;
CREATE INDEX units_by_hash ON units (unit_hash);
INSERT INTO decisions VALUES (1, 'matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0',
  '512,512,512', 'tiled', 'TM=16,TN=8', 183250.5, 0.97, 1763800000, 0.99);
INSERT INTO units VALUES (1, 0, 'tiled', 'TM=16,TN=8', 'e3a1', 1, 183250.5, 182000.0, 184500.0, 12, 1, NULL, 1);
INSERT INTO units VALUES (1, 1, 'tiled', 'TM=32,TN=8', '77c0', 1, 201500.0, 199800.0, 203100.0, 9, 1, NULL, 1);

CREATE TABLE deferred (
  op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,
  key TEXT NOT NULL, args TEXT NOT NULL, created INTEGER NOT NULL,
  PRIMARY KEY (op, set_hash, device, version, key)) WITHOUT ROWID;
INSERT INTO deferred VALUES ('matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0', '64,64,64', 'n=64', 1763800100);
CREATE TABLE progress (
  op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,
  key TEXT NOT NULL,
  candidate TEXT NOT NULL, config TEXT, unit_hash TEXT NOT NULL,
  outcome INTEGER NOT NULL, time_ns REAL NOT NULL,
  ci_low_ns REAL NOT NULL, ci_high_ns REAL NOT NULL,
  runs INTEGER NOT NULL, warmups INTEGER NOT NULL, message TEXT,
  finalist INTEGER NOT NULL DEFAULT 0, created INTEGER NOT NULL,
  PRIMARY KEY (op, set_hash, device, version, key, unit_hash)) WITHOUT ROWID;
CREATE INDEX progress_by_hash ON progress (unit_hash);
INSERT INTO progress VALUES ('matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0', '96', 'tiled', 'TM=8,TN=8', 'aa01',
  1, 5000.0, -1, -1, 2, 0, NULL, 0, 1763800150);
PRAGMA user_version = 5;
