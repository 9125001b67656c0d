"""The exact engine over KV caches: the library's calls, the running batches, one block over a batch
of rows, the drafts, a run's settings, its trace and a block's replay."""
