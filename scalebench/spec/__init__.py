"""What a user asks for and how a configuration is identified: the SweepSpec and its parsers,
the LaunchSpec and Job sent to workers, configuration keys. Imports the framework and vet
registries only to route their tables (config); never running, analysis or reports."""
