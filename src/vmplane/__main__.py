from vmplane.cli.app import main

main()
