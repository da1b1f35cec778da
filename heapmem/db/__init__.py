"""The file: the compiled library's door (native: the library, loading it
into connections, its cffi bindings), the schema and its migrations
(schema), every statement heapmem runs (sql), and the one place a store's
connection is chosen (connect: a file through apsw, or a libSQL server).

The bottom layer: it imports nothing of heapmem's but errors, validate,
config and _version.
"""
