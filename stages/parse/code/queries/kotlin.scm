(package_header (qualified_identifier) @package)
(class_declaration (modifiers (class_modifier) @_m) name: (_) @name (#eq? @_m "enum")) @definition.enum
(class_declaration "interface" name: (_) @name) @definition.interface
(class_declaration name: (_) @name) @definition.class
(object_declaration name: (_) @name) @definition.class
(function_declaration name: (_) @name) @definition.function
(import) @import.import
