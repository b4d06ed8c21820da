"""render: the formats a report is shown in, one module each, over the same report (never over text
another module wrote): prom (Prometheus textfile collector), nfd (a Node Feature Discovery feature
file), check (the one line node-health agents read). May import every layer below app."""
