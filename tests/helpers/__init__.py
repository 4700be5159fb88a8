"""Helpers shared by several test modules, grouped by topic; no tests here. Fixtures shared by
several modules live in tests/conftest.py, and a test module never imports another
(tests/test_layering.py checks)."""
