from nanguard.cli import main

raise SystemExit(main())
