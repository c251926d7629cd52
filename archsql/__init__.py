"""archsql: LLM architecture specs evaluated once into Arrow tables, queried as SQL."""

__version__ = "0.1.0"
