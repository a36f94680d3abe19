from windtunnel.cli import app

app()
