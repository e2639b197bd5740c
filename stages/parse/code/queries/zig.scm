(variable_declaration (identifier) @name (struct_declaration) @body) @definition.struct
(variable_declaration (identifier) @name (enum_declaration) @body) @definition.enum
(variable_declaration (identifier) @name (union_declaration) @body) @definition.struct
(function_declaration name: (_) @name) @definition.function
(test_declaration) @definition.function
(builtin_function (builtin_identifier) @_b (arguments (string (string_content) @import.import))
  (#eq? @_b "@import"))
