(value_definition (let_binding pattern: (value_name) @name (parameter))) @definition.function
(type_definition (type_binding name: (_) @name)) @definition.type
(module_definition (module_binding (module_name) @name body: (structure) @body)) @definition.module
(module_type_definition (module_type_name) @name) @definition.interface
(class_definition (class_binding name: (_) @name)) @definition.class
(open_module module: (_) @import.open)
