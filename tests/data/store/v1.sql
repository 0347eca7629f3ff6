-- A kerntune cache of schema version 1, the first design: one table of decisions, keys as
-- comma-separated decimal words, no confidence and no per-unit rows. tests/test-store.c builds
-- a file from this text with sqlite3_exec and checks that opening it migrates every decision.
CREATE TABLE decisions (
  op TEXT NOT NULL, set_hash TEXT NOT NULL, device TEXT NOT NULL, version TEXT NOT NULL,
  key TEXT NOT NULL,
  winner_candidate TEXT NOT NULL, winner_config TEXT,
  time_ns REAL NOT NULL, created INTEGER NOT NULL,
  PRIMARY KEY (op, set_hash, device, version, key));
INSERT INTO decisions VALUES ('matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0',
  '512,512,512', 'tiled', 'TM=16,TN=8', 183250.5, 1763800000);
INSERT INTO decisions VALUES ('matmul', '9f2c4e1a7b3d5f60', 'cpu:x86_64:avx2:8t', '0.1.0',
  '1024,1024,1024', 'tiled', 'TM=32,TN=8', 1466004.0, 1763800100);
INSERT INTO decisions VALUES ('axpy', '04d1e7c2aa90b3f1', 'cpu:x86_64:avx2:8t', '0.1.0',
  '1048576,-1', 'unrolled', NULL, 95112.25, 1763800200);
PRAGMA user_version = 1;
