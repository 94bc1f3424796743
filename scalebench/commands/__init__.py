"""One module per subcommand: register(subparsers) adds its flags and sets run(args). Only cli
imports commands; a command may import any stage below it (running, analysis, tracking, report,
vet, spec), never another command's internals beyond shared flag helpers."""
