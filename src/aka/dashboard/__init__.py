"""`aka dashboard`: a static site of run results (docs/architecture.md)."""
