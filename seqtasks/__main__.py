from seqtasks.cli import main

main()
