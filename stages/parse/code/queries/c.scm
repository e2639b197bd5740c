(function_definition declarator: [
  (function_declarator declarator: (_) @name)
  (pointer_declarator declarator: (function_declarator declarator: (_) @name))
  (pointer_declarator declarator: (pointer_declarator declarator: (function_declarator declarator: (_) @name)))
]) @definition.function
(struct_specifier name: (_) @name body: (_)) @definition.struct
(union_specifier name: (_) @name body: (_)) @definition.struct
(enum_specifier name: (_) @name body: (_)) @definition.enum
(type_definition type: (struct_specifier !name body: (_)) declarator: (type_identifier) @name) @definition.struct
(type_definition type: (enum_specifier !name body: (_)) declarator: (type_identifier) @name) @definition.enum
(preproc_include path: (_) @import.include)
