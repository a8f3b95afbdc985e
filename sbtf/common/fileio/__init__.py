"""Reading and writing model files safely: the pickle / zip / YAML readers, the load budget, the model data schema,
the file-format registry and atomic writes."""
