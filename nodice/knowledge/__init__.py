"""Starter knowledge base of ``nodice evolve``: Markdown documents searched by relevance."""
