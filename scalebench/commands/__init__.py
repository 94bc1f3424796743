"""One module per subcommand: register(subparsers) adds its flags and sets run(args)."""
