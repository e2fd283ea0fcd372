"""The test suite of seqtasks: tests/<part>/test_<module>.py for seqtasks/<part>/<module>.py (docs/testing.md)."""
