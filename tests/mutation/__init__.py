"""Mutation testing: planted one-line bugs and the runner that checks the suite catches each (run.py)."""
