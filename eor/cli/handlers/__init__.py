"""What the commands that load heavy libraries do (models, numpy, a web server), away from their parsers: each
module here holds the handlers of commands that load the same libraries, and imports them at its top. A
parser names its handler as "module:function", and `eor.cli.main` imports the module only when its command
runs, so `eor --help` loads none of this.
"""
