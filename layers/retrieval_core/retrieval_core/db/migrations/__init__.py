"""Versioned, idempotent schema migrations, one SQL file per version. Safe to run from many processes at once.

- `versions/NNNN_<slug>.sql`: version NNNN (consecutive from 0001). The file's first line is a comment
  giving its description, which `schema_migrations.name` records. `steps` reads the folder.
- `runner`: a run takes an advisory lock and applies every missing version. Consecutive ordinary
  steps run in one transaction: all of them or, on any failure, none. A file whose leading comments
  hold the line `-- migrate: no-transaction` (CREATE INDEX CONCURRENTLY, which PostgreSQL refuses
  inside a transaction) runs on its own, after the steps before it commit, one statement at a time,
  and is recorded once all its statements succeeded. Such a step must be safe to run again from its
  start: a run cut off inside it (a deploy's time-out) leaves the statements it finished, and the
  next run repeats the step. What a run committed is never redone: the next run goes on from there.
- `bookkeeping`: `schema_migrations` records each applied version with the SHA-256 of its file. A
  database migrated before checksums were kept gets them recorded on its first run; afterwards a run
  that finds an applied version whose file changed refuses (MigrationChecksumError) and applies
  nothing: a change goes into a new version.

Migrations only add (tables, columns, indexes, constraints); none drops data. Given a time budget (a
Lambda's remaining time), a run retries connecting while the budget allows and bounds every
statement by the time left, so that it fails and rolls back rather than being killed half-way.
"""
