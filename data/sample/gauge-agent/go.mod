module example.com/gauge-agent

go 1.22
