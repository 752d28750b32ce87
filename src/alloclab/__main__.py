from alloclab.cli import main

raise SystemExit(main())
