"""The engine: parse rows and events, keep them per rank (the store), and compute every figure and
health rule from it. Nothing here knows about files, hosts or screens."""
