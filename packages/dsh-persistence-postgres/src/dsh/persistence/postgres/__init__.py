"""PostgreSQL session persistence for dsh."""
