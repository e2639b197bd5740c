(package_declaration [(scoped_identifier) (identifier)] @package)
(class_declaration name: (_) @name) @definition.class
(record_declaration name: (_) @name) @definition.class
(interface_declaration name: (_) @name) @definition.interface
(annotation_type_declaration name: (_) @name) @definition.interface
(enum_declaration name: (_) @name) @definition.enum
(method_declaration name: (_) @name body: (_)) @definition.function
(constructor_declaration name: (_) @name) @definition.function
(import_declaration) @import.import
