from topicsrv.cli import main

raise SystemExit(main())
