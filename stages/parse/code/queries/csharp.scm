(namespace_declaration name: (_) @name) @definition.namespace
(file_scoped_namespace_declaration name: (_) @name) @definition.namespace
(class_declaration name: (_) @name) @definition.class
(record_declaration name: (_) @name) @definition.class
(struct_declaration name: (_) @name) @definition.struct
(interface_declaration name: (_) @name) @definition.interface
(enum_declaration name: (_) @name) @definition.enum
(method_declaration name: (_) @name body: (_)) @definition.function
(constructor_declaration name: (_) @name) @definition.function
(using_directive) @import.use
