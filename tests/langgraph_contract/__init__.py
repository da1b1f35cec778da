"""LangGraph's own store tests, run against HeapmemStore (PROVENANCE.md)."""
