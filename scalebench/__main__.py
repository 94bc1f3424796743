from scalebench.cli import main

raise SystemExit(main())
