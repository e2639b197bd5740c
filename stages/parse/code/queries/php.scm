(namespace_definition name: (_) @name) @definition.namespace
(class_declaration name: (_) @name) @definition.class
(interface_declaration name: (_) @name) @definition.interface
(trait_declaration name: (_) @name) @definition.trait
(enum_declaration name: (_) @name) @definition.enum
(function_definition name: (_) @name) @definition.function
(method_declaration name: (_) @name body: (_)) @definition.function
(namespace_use_declaration) @import.use
(require_expression (_) @import.require)
(require_once_expression (_) @import.require)
(include_expression (_) @import.include)
(include_once_expression (_) @import.include)
