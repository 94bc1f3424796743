"""The models: builders, input sizes, parameter counts, FLOPs per image. Imports only spec
(errors) and records.atomic (the FLOPs cache)."""
