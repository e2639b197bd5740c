(class_declaration "extension" name: (_) @name) @definition.impl
(class_declaration "struct" name: (_) @name) @definition.struct
(class_declaration "enum" name: (_) @name) @definition.enum
(class_declaration name: (_) @name) @definition.class
(protocol_declaration name: (_) @name) @definition.interface
(function_declaration name: (simple_identifier) @name) @definition.function
(init_declaration "init" @name) @definition.function
(import_declaration) @import.import
