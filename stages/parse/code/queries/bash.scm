(function_definition name: (_) @name) @definition.function
(command name: (command_name) @_c argument: (_) @import.source (#any-of? @_c "source" "."))
