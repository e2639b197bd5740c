(function_declaration name: (_) @name) @definition.function
(function_call name: (identifier) @_r arguments: (arguments (string content: (_) @import.require))
  (#eq? @_r "require"))
