-- A kerntune cache of schema version 2, as kerntune 0.1.0 wrote it before the requested
-- confidence and the finalists were kept: decisions with an id and a confidence, and their
-- units. tests/test-store.c builds a file from this text with sqlite3_exec and checks that
-- opening it migrates every decision and unit to version 3.
CREATE TABLE decisions (
  id INTEGER PRIMARY KEY,
  op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,
  key TEXT NOT NULL,
  winner_candidate TEXT NOT NULL, winner_config TEXT,
  time_ns REAL NOT NULL, confidence REAL NOT NULL DEFAULT -1, created INTEGER NOT NULL,
  UNIQUE (op, set_hash, device, version, key));
CREATE TABLE units (
  decision INTEGER NOT NULL REFERENCES decisions (id) ON DELETE CASCADE,
  idx INTEGER NOT NULL,
  candidate TEXT NOT NULL, config TEXT, unit_hash TEXT NOT NULL,
  outcome INTEGER NOT NULL, time_ns REAL NOT NULL,
  ci_low_ns REAL NOT NULL, ci_high_ns REAL NOT NULL,
  runs INTEGER NOT NULL, warmups INTEGER NOT NULL, message TEXT,
  PRIMARY KEY (decision, idx)) WITHOUT ROWID;
CREATE INDEX units_by_hash ON units (unit_hash);
INSERT INTO decisions VALUES (1, 'matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0',
  '512,512,512', 'tiled', 'TM=16,TN=8', 183250.5, 0.7, 1763800000);
INSERT INTO decisions VALUES (2, 'axpy', '04d1e7c2aa90b3f1', 'cpu:x86_64:avx2:8t', '0.1.0',
  '1048576,-1', 'unrolled', NULL, 95112.25, -1, 1763800200);
INSERT INTO units VALUES (1, 0, 'tiled', 'TM=16,TN=8', 'e3a1', 1, 183250.5, 182000.0, 184500.0, 12, 1, NULL);
INSERT INTO units VALUES (1, 1, 'tiled', 'TM=32,TN=8', '77c0', 1, 201500.0, 199800.0, 203100.0, 9, 1, NULL);
INSERT INTO units VALUES (1, 2, 'naive', NULL, '51fe', 4, -1, -1, -1, 0, 1,
  'output ''c'' element 17: expected 3.5, got 3.25');
PRAGMA user_version = 2;
